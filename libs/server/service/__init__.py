"""The service runtime: what every service process shares (context, routes, the error seam, start-up).

A service module provides `routes(ctx) -> Routes` (libs/server/service/routes.py); the runtime
validates each request's arguments against the verb's contract model, opens one transaction on the
org's database, runs the route's handler and turns every failure into a typed `Reply`.

This package imports nothing itself, so `registry` can be loaded by a process (the edge) that must
not load the database driver the runtime needs.
"""
