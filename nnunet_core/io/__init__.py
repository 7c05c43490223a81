"""Reading and writing: images, dataset.json, JSON files and blosc2 case stores."""
