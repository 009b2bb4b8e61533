"""Postgres access shared by the services: migrations, connection pools per org, the access
policy (`access`: admin identity, scopes, tokens), admin helpers.

Service-specific SQL lives next to each service (`services/<name>/queries.py`); this package owns
only the schema and what every service needs to reach it.
"""
