"""Django's PostgreSQL backend with the web pool's health check (dashboard/db_pool.py)."""
