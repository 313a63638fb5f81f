"""CDK constructs for lmikit deployments (install with ``pip install 'lmikit[cdk]'``)."""
