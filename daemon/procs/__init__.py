"""Agent processes: spawning, output plumbing, process trees and background processes.

``exec``, ``/v1/exec/stream`` and the ``process_*`` tools share these pieces:
one way to spawn (cwd, env, exec user, error messages), one way to find and
kill every descendant of a command (:mod:`.tree`), one spill store with a quota
(:mod:`.spill`), one UTF-8 chunker for streamed text (:mod:`.utf8`) and the
ring buffer and table behind background processes (:mod:`.ring`, :mod:`.table`).
"""
