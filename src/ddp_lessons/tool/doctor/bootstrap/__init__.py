"""What the doctor puts first on the Python path of the processes it starts.

sitecustomize (run by Python at start-up: installs the doctor's recorder once torch is imported).
"""
