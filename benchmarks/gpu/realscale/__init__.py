"""The GPU check's real-size sections: sections (the rows), data (their data and shipped plans),
upstream (upstream's side)."""
