"""Post-edit diagnostics: the checks, and the baseline/after subtraction."""
