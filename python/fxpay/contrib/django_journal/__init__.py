"""A Django app for :class:`fxpay.PostgresJournal`: add ``"fxpay.contrib.django_journal"`` to
``INSTALLED_APPS``, and ``manage.py migrate`` makes the journal's table (``fxpay_journal``) in
each PostgreSQL database it migrates; ``manage.py fxpay_unknown`` lists the keys whose outcome
is unknown and settles one. The journal itself: :func:`fxpay.contrib.django.journal`.
"""
