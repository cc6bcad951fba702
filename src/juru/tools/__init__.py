"""Built-in tools: run by the server inside a hosted agent's loop (`text_to_speech`,
`rag_search`), with the helpers they need (speech synthesis, chunking, PDF text, search terms)."""
