"""Settings for the test suite: production settings (DEBUG off) plus test-only defaults.

DATABASE_URL and REDIS_URL still come from the environment, so the same suite
runs on SQLite and on PostgreSQL (CI).
"""
import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
# A Redis database of its own, so tests never touch a developer's queues.
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

from ownwords_site.settings import *  # noqa: E402,F401,F403

# Hashing passwords properly is slow and tests create many users.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
