"""Search: the feature expression language, its evaluation over sparse codes, text and label search."""
