"""URL classification's rules stage (stage 1): the taxonomy, the URL rules as data, the matcher."""
