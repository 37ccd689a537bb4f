import os

# Live progress displays depend on timing; stored notebook outputs must not.
# Set here, at the repository root, so the kernels nbval starts inherit it too.
os.environ.setdefault("DDP_LESSONS_PROGRESS", "0")
