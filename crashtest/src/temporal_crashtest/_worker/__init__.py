"""The worker side: what runs inside a worker process. The process itself (`process`), the
interceptor that stamps activities and kills at a site (`interceptor`), the effects an activity
makes (`effects`, seen through the database drivers' `commits` and the HTTP libraries' `http`),
the observers' halves (`halves`, the HTTP recorder `http_record`), the status channel
(`status`, `task_failures`), and the deploy test's replay pass (`replay`)."""
