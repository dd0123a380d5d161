"""Services on a project's data: projects and sessions (`sessions`), task lists and exclusions
(`fixed_inputs`), surveys (`surveys`, `survey_store`), the import jobs (`import_jobs`,
`survey_import_jobs`), members (`members`), the audit log's writer (`audit_log`) and the facts the
explorer sorts on (`cohort_facts`). They stand on `experiments.core` and the models, never on
execution, analysis or the pages."""
