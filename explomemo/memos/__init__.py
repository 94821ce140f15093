"""The library: the memo cache (record, recall, check, forget) and export and import."""
