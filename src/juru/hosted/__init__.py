"""The Hosted Agents API's rules: agents, threads and runs of an account."""
