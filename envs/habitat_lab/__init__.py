"""habitat-lab tasks (PointNav, ImageNav, ObjectNav, ...) as a VecEnv; the only package that imports `habitat`."""
