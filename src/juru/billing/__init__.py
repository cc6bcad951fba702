"""Accounts, API keys, prices with discounts, and rate limits."""
