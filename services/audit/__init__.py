"""The audit service: get_audit_log, why, export."""
