"""gpuscale: will this training job run faster on several GPUs, or am I paying for communication?"""

__version__ = "0.1.0"
