"""Where the bytes of files live (audio made by built-in tools); their rows are in the store."""
