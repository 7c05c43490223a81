"""Security probe campaign: hostile config values, paths, zips, model code, locks and malformed
files against the real commands, each checked for markers, an unchanged decoy tree and a one-line
refusal or a correct run (README.md here)."""
