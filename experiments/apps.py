from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "experiments"
    verbose_name = "Experiments"

    def ready(self):
        # Every process of the app (web, workers, commands) reads a key only for a configuration
        # the administrator's endpoint list allows: the client asks before reading.
        from experiments.execution.endpoints import install_key_gate
        install_key_gate()
