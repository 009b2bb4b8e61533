-- Schema v29: pg_prewarm, where the server ships it and this role may create it.
--
-- After a consolidation run the service reads the pages every hot search needs back into the
-- buffer cache (services/consolidation/prewarm.py). Without the extension runs say so in their
-- result and searches stay correct; only their first queries after a large run are slower.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm') THEN
        CREATE EXTENSION IF NOT EXISTS pg_prewarm;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pg_prewarm not created (%); consolidation runs will report it unavailable', SQLERRM;
END
$$;
