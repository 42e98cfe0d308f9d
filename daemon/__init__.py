"""airlock.daemon"""
