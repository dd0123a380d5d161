"""Survey studies' pages: import (owners), study, run dashboard, respondents' items."""
