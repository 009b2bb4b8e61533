-- Schema v8: entity-resolution calibration, one row per `echo-memory calibrate` run.
--
-- A run measures how well the resolution score separates variants from look-alikes on the
-- store's own decisions plus the shipped labelled pairs (AUC with a bootstrap 95% interval,
-- deferral precision and recall at the thresholds in force). `applied` rows carry thresholds the
-- writes service uses from then on; a run is applied only when asked and only when the
-- interval's lower end is above chance (0.5). `health` reads the newest row.
CREATE TABLE IF NOT EXISTS resolution_calibration (
    id                  bigserial PRIMARY KEY,
    computed_at         timestamptz NOT NULL DEFAULT now(),
    computed_by         text NOT NULL,
    store_pairs         integer NOT NULL CHECK (store_pairs >= 0),
    labelled_pairs      integer NOT NULL CHECK (labelled_pairs >= 0),
    auc                 double precision NOT NULL,
    auc_low             double precision NOT NULL,
    auc_high            double precision NOT NULL,
    deferral_precision  double precision NOT NULL,
    deferral_recall     double precision NOT NULL,
    defer_at            double precision NOT NULL CHECK (defer_at > 0 AND defer_at <= 1),
    merge_at            double precision NOT NULL CHECK (merge_at > 0 AND merge_at <= 1 AND merge_at >= defer_at),
    applied             boolean NOT NULL DEFAULT false,
    details             jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS resolution_calibration_applied_idx ON resolution_calibration (applied, computed_at DESC);
