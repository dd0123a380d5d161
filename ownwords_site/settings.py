"""Settings for OwnWords Lab, read from the environment (see README, "Configuration").

Outside DEBUG the settings refuse what would be unsafe on a shared server (no SECRET_KEY, any host
allowed without saying so); the production switches (secure cookies, HSTS, SSL redirect, the
proxy's header) are off by default so that a plain local start works, and README's production
example turns them on (`manage.py check --deploy` is clean with it).
"""
import os
import warnings
from datetime import timedelta
from pathlib import Path

from ownwords_site import embedded
from ownwords_site.env import (
    ConfigError,
    database_from_url,
    env_bool,
    env_float,
    env_int,
    env_json,
    env_list,
    env_str,
    llm_endpoints,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
# Only ever used for a local demo with DEBUG on.
BUILT_IN_DEMO_KEY = "insecure-local-demo-key-never-use-in-production"
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ConfigError("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = BUILT_IN_DEMO_KEY
if SECRET_KEY == BUILT_IN_DEMO_KEY:
    if not DEBUG:
        raise ConfigError("SECRET_KEY is the built-in demo key: set a secret one when DEBUG is off")
    # Every start says so: a demo left running on a reachable address signs sessions with a
    # key anyone can read in this file.
    warnings.warn("DEBUG is on and SECRET_KEY is the built-in demo key: sessions can be forged. "
                  "Never serve this to anyone else; set SECRET_KEY and turn DEBUG off.",
                  RuntimeWarning, stacklevel=1)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
if "*" in ALLOWED_HOSTS and not DEBUG and not env_bool("ALLOW_ANY_HOST", False):
    # A wildcard lets any Host header through (password-reset links, cache poisoning).
    raise ConfigError("ALLOWED_HOSTS=* is refused when DEBUG is off: name the server's hosts, "
                      "or set ALLOW_ANY_HOST=1 if a proxy in front already checks the Host header")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles: runserver leaves static files to whitenoise, as in production.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_rq",
    "axes",
    # The JSON API (experiments/web/api): its docs page's Swagger UI comes from ninja's static files.
    "ninja",
    "experiments",
    "annotations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # The Content-Security-Policy header on every answer, refusals included (ownwords_site/middleware.py).
    "ownwords_site.middleware.ContentSecurityPolicy",
    # Static files, compressed and with a long cache lifetime, before any other work on the request.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Pages compressed (the analysis page's figures are large). BREACH: a page's compressed size can
    # leak a secret it reflects next to attacker-chosen text; Django's GZipMiddleware pads each
    # response with random-length bytes ("Heal The Breach", Django 4.2+) and masks the CSRF token
    # per response, and no page here echoes a secret beside query text.
    "django.middleware.gzip.GZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before the CSRF check, which reads the body: 413 from the Content-Length, then 400 for input
    # PostgreSQL cannot hold (NUL, lone surrogates, ids and pages out of range).
    "ownwords_site.middleware.RequestBodyLimit",
    "ownwords_site.middleware.QueryInputGate",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "ownwords_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "ownwords_site.wsgi.application"

# One engine everywhere: PostgreSQL. Without DATABASE_URL (or REDIS_URL) the embedded servers
# under var/ are started or reused (ownwords_site/embedded.py); the URL is put back into the
# environment so that the processes this one starts (workers, test helpers) use the same server.
VAR_DIR = BASE_DIR / "var"
if not env_str("DATABASE_URL"):
    os.environ["DATABASE_URL"] = embedded.postgres_url(VAR_DIR)
DATABASES = {"default": database_from_url(os.environ["DATABASE_URL"])}
# PostgreSQL compiles queries whose cost estimate is high (the explorer's, over a million
# predictions) before running them: 300 ms and more that a page's query never earns back.
DATABASES["default"]["OPTIONS"]["options"] = "-c jit=off"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
     "OPTIONS": {"min_length": env_int("PASSWORD_MIN_LENGTH", 10)}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- logins: rate limited per user name and address (django-axes) ----------------------------
AUTHENTICATION_BACKENDS = [
    "ownwords_site.login_limits.WebLoginRateLimit",  # refuses a locked-out login; checks no password
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15))
# Per user name *and* address: a stranger cannot lock a colleague out from elsewhere, and one
# address cannot try one account forever.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "ownwords_site.login_limits.locked_out_page"
AXES_CLIENT_IP_CALLABLE = "ownwords_site.login_limits.client_ip"
# How many proxies of ours stand in front and append to X-Forwarded-For; 0: trust no header.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0)

# --- outgoing mail: only rater invites use it, and only when EMAIL_HOST is set ----------------
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "ownwords@localhost")

# --- HTTPS behind a proxy: switches for production (README, "Configuration") ------------------
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
_proxy_ssl_header = env_str("SECURE_PROXY_SSL_HEADER", "")
if _proxy_ssl_header:
    # Only behind a proxy that sets this header itself (and drops a client's own copy).
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_ssl_header.strip().upper().replace("-", "_"), "https")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# plotly.js is vendored under static/vendor/plotly (never a CDN: the data is private and the
# network may be closed).
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "var" / "static")))
# `manage.py collectstatic` names every file by its content hash and writes gzip copies; whitenoise
# serves them compressed, hashed names with a ten-year immutable cache lifetime (a new file gets a
# new name). With DEBUG on, whitenoise serves the files as they are in static/.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "project_list"
LOGOUT_REDIRECT_URL = "login"

# Every request body is refused above OWNWORDS_MAX_REQUEST_MB from its Content-Length, before it is
# read (ownwords_site/middleware.py), except the import uploads' larger limits below; form fields
# (not files) are held in memory up to the same size, files above FILE_UPLOAD_MAX_MEMORY_SIZE go to disk.
OWNWORDS_MAX_REQUEST_MB = env_int("OWNWORDS_MAX_REQUEST_MB", 10)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", OWNWORDS_MAX_REQUEST_MB * 1024 * 1024)
# Interview uploads: refused above OWNWORDS_MAX_UPLOAD_MB (before the body is read), imported by a
# background job above OWNWORDS_BACKGROUND_IMPORT_MB from OWNWORDS_IMPORT_DIR (a worker must read it),
# and spilled to a temporary file above Django's in-memory size instead of held in memory.
OWNWORDS_MAX_UPLOAD_MB = env_int("OWNWORDS_MAX_UPLOAD_MB", 50)
OWNWORDS_BACKGROUND_IMPORT_MB = env_int("OWNWORDS_BACKGROUND_IMPORT_MB", 5)
OWNWORDS_IMPORT_DIR = env_str("OWNWORDS_IMPORT_DIR", str(BASE_DIR / "var" / "imports"))
FILE_UPLOAD_MAX_MEMORY_SIZE = env_int("FILE_UPLOAD_MAX_MEMORY_SIZE", 2_621_440)
# Survey imports: processes reading and preparing respondents while the import writes (0 or 1:
# in the importing process). Survey uploads (all files together): refused above
# OWNWORDS_SURVEY_MAX_UPLOAD_MB before the body is read, a background job above OWNWORDS_SURVEY_BACKGROUND_MB.
OWNWORDS_SURVEY_IMPORT_WORKERS = env_int("OWNWORDS_SURVEY_IMPORT_WORKERS", 2)
OWNWORDS_SURVEY_MAX_UPLOAD_MB = env_int("OWNWORDS_SURVEY_MAX_UPLOAD_MB", 200)
OWNWORDS_SURVEY_BACKGROUND_MB = env_int("OWNWORDS_SURVEY_BACKGROUND_MB", 5)

if not env_str("REDIS_URL"):
    os.environ["REDIS_URL"] = embedded.redis_url(VAR_DIR)
REDIS_URL = os.environ["REDIS_URL"]
# One queue per run phase, so a slow judge backlog never starves generation.
RQ_QUEUE_NAMES = ["default", "memories", "generation", "decisions", "judging", "analysis"]
RQ_QUEUES = {
    name: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": 3600} for name in RQ_QUEUE_NAMES
}

# --- the run engine (experiments/execution) -------------------------------------------------
# Slot jobs a MultiSlotWorker process carries at once (threads); also the floor of its pooled
# HTTP connections per host.
OWNWORDS_WORKER_SLOTS = env_int("OWNWORDS_WORKER_SLOTS", 16, minimum=1)
# Database connections per worker process (the name is older than the connections' loans). A
# slot's database steps are short (one or two statements) and its wait for the service long, so a
# few connections can serve many slots: up to this many slots each keep a connection of their own;
# with more, this many are lent to the slot threads one step at a time (workers.LoanedConnections).
# Each connection is a PostgreSQL backend that plans the engine's statements and fills its caches
# anew: 4 per process served K = 128 as well as 16 did, with a tenth of the planning time
# (benchmarks/engine-results.md, "four database connections per worker process").
OWNWORDS_WORKER_DB_THREADS = env_int("OWNWORDS_WORKER_DB_THREADS", min(OWNWORDS_WORKER_SLOTS, 4), minimum=1)
# How long a worker's thread may run Python before another gets the GIL (Python's default: 5 ms).
# A slot thread woken with an in-flight place waits for the GIL behind threads parsing answers
# and building records; that wait is on the path of the next request.
OWNWORDS_WORKER_SWITCH_S = env_float("OWNWORDS_WORKER_SWITCH_S", 0.001)
# A phase's slots handed out to the queue and unsettled at most; None (or 0): the hand-out's own
# window, max(4096, 32 x the phase's in-flight cap) (experiments/execution/hand_out.py).
OWNWORDS_HAND_OUT_WINDOW = env_int("OWNWORDS_HAND_OUT_WINDOW", None)
# The journal's statements are prepared on the server (experiments/execution/hot_sql.py); off
# behind a transaction-pooling pgbouncer older than 1.21.
OWNWORDS_DB_PREPARE = env_bool("OWNWORDS_DB_PREPARE", True)
# On: a slot thread handed an in-flight place has its first attempt reserved in the receipt of the
# answer that freed it (one commit for both), and waits for that statement. Off (the default): it
# is given the place at once and reserves its own attempt while that receipt is written: on a
# disk whose WAL flush takes 0.1 ms this sends sooner (benchmarks/engine-results.md, 6 Dec 2026);
# where each flush takes milliseconds, on may be the better choice.
OWNWORDS_RESERVE_WITH_RECEIPT = env_bool("OWNWORDS_RESERVE_WITH_RECEIPT", False)
# Mem0's stores (a folder per run and process) and its own config file, which Mem0 finds through
# MEM0_DIR when it is imported: put into the environment here, as the URLs above are.
OWNWORDS_MEM0_DIR = env_str("OWNWORDS_MEM0_DIR") or str(VAR_DIR / "mem0")
os.environ.setdefault("MEM0_DIR", OWNWORDS_MEM0_DIR)

# The provider endpoints a protocol may name (experiments/execution/endpoints.py); nothing else
# is ever called. OWNWORDS_LLM_ENDPOINTS: inline JSON or the path of a JSON file.
# Each entry's key_env lists the only variables its key may be read from (README, "Provider endpoints").
DEFAULT_LLM_ENDPOINTS = [
    {"name": "openai", "provider": "openai", "base_url": "https://api.openai.com/v1", "key_env": ["OPENAI_API_KEY"]},
    {"name": "gemini", "provider": "gemini", "base_url": "https://generativelanguage.googleapis.com/v1beta",
     "key_env": ["GEMINI_API_KEY", "GOOGLE_API_KEY"]},
    {"name": "anthropic", "provider": "anthropic", "base_url": "https://api.anthropic.com/v1",
     "key_env": ["ANTHROPIC_API_KEY"]},
    {"name": "offline", "provider": "offline"},
]
LLM_ENDPOINTS = llm_endpoints(env_json("OWNWORDS_LLM_ENDPOINTS", DEFAULT_LLM_ENDPOINTS))
# Keys and passwords posted to a view marked sensitive stay hidden on error pages, DEBUG on or off.
DEFAULT_EXCEPTION_REPORTER_FILTER = "ownwords_site.reporting.SecretsHiddenEvenInDebug"
# Whether any signed-in account may create a project (and own it); off: staff and holders of the
# experiments.add_project permission only. Spending on a paid endpoint also needs a grant (README).
OWNWORDS_ANYONE_MAY_CREATE_PROJECTS = env_bool("OWNWORDS_ANYONE_MAY_CREATE_PROJECTS", True)

# Trained rerankers the pools page runs as pickers (experiments.core.rankers): comma-separated
# dotted paths or entry-point names, e.g. "experiments.core.rankers:QuestionOverlapRanker".
OWNWORDS_RANKERS = tuple(spec.strip() for spec in env_str("OWNWORDS_RANKERS", "").split(",") if spec.strip())

# The JSON API (/api/v1/, experiments/web/api): requests per token per clock minute, counted in Redis.
OWNWORDS_API_RATE_PER_MINUTE = env_int("OWNWORDS_API_RATE_PER_MINUTE", 120, minimum=1)

# The dashboard of django-rq lives at /django-rq/, for superusers only (ownwords_site/urls.py);
# its admin copy would be open to every staff user, so it is not registered.
RQ_SHOW_ADMIN_LINK = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},
    # A 403 is logged as one line, without a traceback.
    "filters": {"permission_denied_one_line": {"()": "ownwords_site.logging_filters.PermissionDeniedOneLine"}},
    "loggers": {"django.request": {"filters": ["permission_denied_one_line"]}},
}
