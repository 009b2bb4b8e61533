"""The consolidation service: tiers, temperature and summaries (demotes, never deletes)."""
