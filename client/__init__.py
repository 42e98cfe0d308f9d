"""airlock.client"""
