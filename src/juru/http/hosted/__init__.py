"""`/v1`: the Hosted Agents API."""
