"""Users' own trainers: finding their code by name, and a model folder's record of it.

Below inference (``predict`` rebuilds a user's network from the recorded copy) and free of torch
(the workflow's config check parses trainer names).
"""
