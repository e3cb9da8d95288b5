mod fingerprint;
mod record;
