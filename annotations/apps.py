from django.apps import AppConfig


class AnnotationsConfig(AppConfig):
    name = "annotations"
    verbose_name = "Human ratings"

    def ready(self):
        from annotations.explorer_filters import register  # models are loaded only now
        register()
