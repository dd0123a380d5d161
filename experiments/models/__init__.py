"""The domain model (docs/design.md §4): interview data and tasks in `data`, protocols, runs and
the request journal in `runs`."""
from experiments.models.data import (  # noqa: F401
    TEXT_ROLES,
    Cohort,
    CohortTask,
    Membership,
    Person,
    Project,
    Role,
    ScreenerItem,
    Session,
    Study,
    Task,
    TaskSet,
    Turn,
)
from experiments.models.runs import (  # noqa: F401
    Amendment,
    Grade,
    Memory,
    ModelCall,
    Prediction,
    Protocol,
    Run,
    Slot,
)
from experiments.models.analysis import AnalysisResult, PoolAnalysisResult, TablesResult  # noqa: F401,E402
from experiments.models.audit import AuditEntry  # noqa: F401,E402
from experiments.models.memory_systems import Mem0Extraction  # noqa: F401,E402
from experiments.models.tally import RunTally  # noqa: F401,E402
from experiments.models.survey import (  # noqa: F401,E402
    SurveyAnswer,
    SurveyExclusion,
    SurveyItem,
    SurveyMemory,
    SurveyRespondent,
    SurveySampleMember,
    SurveyStudy,
)
from experiments.models.task_grades import TaskGrades  # noqa: F401,E402
from experiments.models.grants import EndpointGrant  # noqa: F401,E402
from experiments.models.paper_report import PaperReport, PaperReportImages  # noqa: F401,E402
from experiments.models.api_tokens import ApiToken  # noqa: F401,E402
