"""Config-driven sweeps: a YAML spec (base config, fixed overrides, grid / list / seeds axes) expands into named
runs, each with its own run dir under the sweep dir; they are validated together, launched locally or as one SLURM
job array, skipped when finished and resumed when interrupted, and summarised into a table and learning curves.

  spec.py     parse a spec, expand it into runs, build and validate every run's config
  runs.py     the sweep dir on disk: manifest, per-run state, metrics, status (done / running / failed / ...)
  launch.py   plan what to do with each run; local (sequential or N at a time) and SLURM array launchers
  summary.py  `ddppo sweep summary`: Markdown table, CSV, learning-curve PNGs
  cli.py      the `ddppo sweep` subcommand (light: imported when the CLI parser is built)
"""
