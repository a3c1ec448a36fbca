"""rmq's dashboard (``rmq-dashboard``, docs/dashboard.md): rocketmq-dashboard's pages for operators,
server-rendered by Flask (Jinja2 templates, autoescaped) and served by waitress.

    app       create_app(settings): the Flask app, its login and error pages
    session   who is logged in, the AdminClient each request goes through, CSRF and write checks
    forms     reading a form or URL parameter (400 with what was expected)
    pages     cluster, topics, consumers, producers
    messages  message searches, a message with its trace, resend
    capacity  rmq-capacity's report, its files confined to capacityReportDir
    config    DashboardSettings (rmq.settings.DASHBOARD_SETTINGS)

A tool like ``perf``: it reads and writes the cluster only through ``rmq.client.admin_client``
(what rmq-admin uses), never through broker or name server code.
"""
