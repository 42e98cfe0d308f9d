"""The search engines behind ``file_search`` and the walker behind ``file_list``.

``engine`` decides once which program searches (rg, the ripgrep wheel's rg, or
grep); ``rg`` and ``grep`` turn a request into argv and parse the program's
output into rows; ``runner`` runs the program with the output cap, the early
stop and the timeout; ``ignore``/``globs``/``walk`` implement .gitignore for the
places no rg runs (the grep fallback and the listing); ``results`` orders,
pages and fits rows into the response budget.
"""
