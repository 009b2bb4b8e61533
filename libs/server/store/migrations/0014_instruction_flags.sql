-- Schema v14: labels on stored text, set at write time (libs/core/hygiene/instructions.py).
--
-- `flags` holds 'instruction_like' when a fact's or an episode's text addresses the agent reading
-- it; the text itself is stored unchanged. Rows written before this version read as unflagged.
-- The partial indexes keep `health`'s count of flagged rows cheap (few rows are flagged).

ALTER TABLE facts ADD COLUMN flags text[] NOT NULL DEFAULT '{}';
ALTER TABLE episodes ADD COLUMN flags text[] NOT NULL DEFAULT '{}';

CREATE INDEX facts_flagged_idx ON facts (scope_id) WHERE flags <> '{}';
CREATE INDEX episodes_flagged_idx ON episodes (scope_id) WHERE flags <> '{}';
