"""airlock.proxy"""
