"""Readers: bytes of one file to its text, one module per format family (`text`, `html`,
`pdf`); a reader that finds no text raises `skip.Skipped` with the category and why."""
