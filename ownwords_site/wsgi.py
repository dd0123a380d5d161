"""The WSGI application (runserver and production servers load it): Django set up and every view
imported, then what that start made moved out of the cyclic garbage collector's reach."""
import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ownwords_site.settings")
application = get_wsgi_application()

# A full collection walks every object the process holds: ~190,000 once the views are loaded,
# 150-480 ms on a loaded 2-core machine, paid by whichever request it falls in (1 page in ~500 of
# benchmarks/api_pages.py). What the start made lives as long as the process: frozen, it is never
# walked again, and a collection walks only what requests made since (and, with a server that
# forks its workers after loading the application, e.g. gunicorn --preload, each worker shares
# those pages instead of copying them when the collector would have touched them). The garbage
# the start left is collected first, so that no unreachable cycle is frozen with the rest.
import ownwords_site.urls  # noqa: E402,F401  every view, now rather than in the first request

gc.collect()
gc.freeze()
