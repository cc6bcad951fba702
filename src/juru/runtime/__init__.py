"""The Agent Runtime contract: class methods served on `/api/reasoning_engine` and
`/api/stream_reasoning_engine`."""
