"""The commit step every editing tool shares: stage, journal, install, restore.

``apply_patch``, ``file_edit``/``file_patch``/``file_multi_patch``,
``file_write`` and the streamed file upload all land their bytes through here:
:mod:`.staging` writes each new content beside its target before anything is
replaced, :mod:`.journal` records the call in the daemon's state dir so a
restart after a kill finishes or undoes it, and :mod:`.committer` installs the
staged files in order and restores what it replaced on any failure. The file
primitives underneath (atomic temp files, the resolver's opens) are
:mod:`airlock.daemon.fsio`.
"""
