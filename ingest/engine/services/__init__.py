"""The operator services: every write outside a worker's turn, one module per thing an operator acts on."""
