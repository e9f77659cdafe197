"""URL classification (seed 004 stage 1): the taxonomy, the URL rules as data, the matcher."""
