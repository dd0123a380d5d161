import os

# Tests run with DEBUG off, as in production; this key exists only for them.
os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
