"""The adversarial battery (see battery.py); not collected by pytest."""
