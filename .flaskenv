FLASK_APP=portal
