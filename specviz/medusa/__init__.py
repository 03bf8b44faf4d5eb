"""Medusa: extra heads on the target's last hidden state guess the tokens after next (see heads.py)."""
